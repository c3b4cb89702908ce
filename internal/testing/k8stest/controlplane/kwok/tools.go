//go:build tools

// Package kwok pins the kwok command build.sh builds; nothing imports it.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
