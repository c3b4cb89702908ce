module github.com/berth-sh/berth

go 1.26.8

require (
	code.dny.dev/ssrf v0.3.0 // the image pull guard's address check: IANA's special-purpose ranges, kept up to date there (providers/local/image/guard.go)
	connectrpc.com/connect v1.21.1
	github.com/BurntSushi/toml v1.6.0 // ~/.modal.toml profiles, read as the Modal client reads them
	github.com/chromedp/cdproto v0.159.0 // CDP commands and events for the viewer's browser tests
	github.com/chromedp/chromedp v0.23.0 // drives headless Chromium in the viewer's browser tests
	github.com/coder/websocket v1.8.15 // Daytona toolbox log streams are websockets
	github.com/dlclark/regexp2/v2 v2.13.0 // tokenizer pre-tokenizer regexes: lookahead and JavaScript's \s (ECMAScript mode)
	github.com/google/go-containerregistry v0.22.1
	github.com/google/nftables v0.3.0 // egress filter in a public sandbox netns, over netlink (no nft binary)
	github.com/klauspost/compress v1.20.4 // zstd image layers
	github.com/moby/buildkit v0.32.2 // the local builder's Dockerfile parser, instructions and shell lexer: Docker's own; v0.32 as later ones raise grpc and a dozen other modules
	github.com/moby/profiles/seccomp v0.3.0 // Docker's default seccomp profile (container.SeccompDocker)
	github.com/modal-labs/modal-client/go v0.11.1 // Modal's official Go SDK; grpc and protobuf below come with it
	github.com/openai/openai-go/v3 v3.98.0 // OpenAI's official SDK: the LLM agents' chat client (retries, Retry-After)
	github.com/opencontainers/runtime-spec v1.3.0
	github.com/pelletier/go-toml/v2 v2.4.3 // task.toml: strict decoding with line and field of each problem
	github.com/prometheus/client_golang v1.25.0 // berth serve /metrics
	github.com/rogpeppe/go-internal v1.16.0 // testscript, for the CLI tests
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/spf13/cobra v1.10.2
	github.com/x448/float16 v0.8.4 // IEEE half floats: the F16 weights of the tiny GGUF model the real-engine tests generate (internal/testing/llamatest)
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.60.0 // html parser: the viewer's tests check pages as a browser parses them
	golang.org/x/sync v0.25.0 // semaphore bounding the agent's blocking calls
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.46.0
	golang.org/x/text v0.42.0 // JavaScript-exact case mapping and collation in chattemplate/jinja; NFC in tokenizer
	gonum.org/v1/plot v0.17.0 // berth view's charts, drawn as SVG on the server (no JS bundle, no CDN)
	google.golang.org/grpc v1.83.2
	google.golang.org/protobuf v1.36.12
	k8s.io/api v0.37.2 // the k8s provider's pod, NetworkPolicy and RBAC types
	k8s.io/apimachinery v0.37.2 // Kubernetes quantities ("500m", "8192Mi") in OpenSandbox resourceLimits
	k8s.io/client-go v0.37.2 // the k8s provider: clientset, one informer, port-forward (WebSocket, SPDY)
	k8s.io/cri-streaming v0.37.2 // the kubelet's port-forward server, in the k8s tests' node shim only
	k8s.io/streaming v0.37.2 // httpstream types of the k8s provider's port-forward sessions
)

require (
	github.com/google/uuid v1.6.0 // E2B build IDs are UUIDs (berth serve template builds)
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/spf13/pflag v1.0.10
	golang.org/x/crypto v0.57.0
	sigs.k8s.io/agent-sandbox v0.5.0 // the k8s provider's agent-sandbox mode: v1beta1 SandboxClaim, SandboxTemplate, SandboxWarmPool types and generated clients only (sum.golang.org does not list v0.5.0: go.sum holds the hash the proxy served)
	sigs.k8s.io/yaml v1.6.0 // internal/testing/k8stest reads agent-sandbox's CRD files
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/agext/levenshtein v1.2.3 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/aristanetworks/gomap v0.0.0-20230726210543-f4e41046dced // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/containerd/typeurl/v2 v2.3.0 // indirect
	github.com/davecgh/go-spew v1.1.2-0.20180830191138-d8f796af33cc // indirect
	github.com/docker/cli v29.7.2+incompatible // indirect
	github.com/docker/docker-credential-helpers v0.9.8 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.1 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-openapi/jsonpointer v1.0.0 // indirect
	github.com/go-openapi/jsonreference v1.0.0 // indirect
	github.com/go-openapi/swag v0.27.1 // indirect
	github.com/go-openapi/swag/cmdutils v0.27.1 // indirect
	github.com/go-openapi/swag/conv v0.27.1 // indirect
	github.com/go-openapi/swag/fileutils v0.27.1 // indirect
	github.com/go-openapi/swag/jsonutils v0.27.1 // indirect
	github.com/go-openapi/swag/loading v0.27.1 // indirect
	github.com/go-openapi/swag/mangling v0.27.1 // indirect
	github.com/go-openapi/swag/netutils v0.27.1 // indirect
	github.com/go-openapi/swag/pools v0.27.1 // indirect
	github.com/go-openapi/swag/stringutils v0.27.1 // indirect
	github.com/go-openapi/swag/typeutils v0.27.1 // indirect
	github.com/go-openapi/swag/yamlutils v0.27.1 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.1 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/google/gnostic-models v0.7.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/gorilla/websocket v1.5.4-0.20250319132907-e064f32e3674 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/kisielk/og-rek v1.3.0 // indirect
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/moby/docker-image-spec v1.3.1 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.3-0.20250322232337-35a7c28c31ee // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/planetscale/vtprotobuf v0.6.1-0.20240319094008-0393e58bdf10 // indirect
	github.com/pmezard/go-difflib v1.0.1-0.20181226105442-5d4384ee4fb2 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/sirupsen/logrus v1.9.4 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	github.com/tonistiigi/go-csvvalue v0.0.0-20240814133006-030d3b2625d0 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/exp v0.0.0-20260603202125-055de637280b // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	golang.org/x/tools v0.49.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	gopkg.in/evanphx/json-patch.v4 v4.13.0 // indirect
	gopkg.in/inf.v0 v0.9.1 // indirect
	gotest.tools/v3 v3.5.2 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/kube-openapi v0.0.0-20260721132016-d427ff9ee9ad // indirect
	k8s.io/utils v0.0.0-20260626114624-be93311217bd // indirect
	sigs.k8s.io/controller-runtime v0.23.3 // indirect
	sigs.k8s.io/json v0.0.0-20250730193827-2d320260d730 // indirect
	sigs.k8s.io/randfill v1.0.0 // indirect
	sigs.k8s.io/structured-merge-diff/v6 v6.4.2 // indirect
)
