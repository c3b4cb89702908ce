package k8s

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metaPatchOpts = metav1.PatchOptions{FieldManager: "berth"}

func slicesSort(s []string) { slices.Sort(s) }
