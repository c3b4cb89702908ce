// A separate module so that berth itself never depends on
// github.com/ardanlabs/jinja: it only measures that engine against the
// references (chattemplate/doc.go has the counts). Run it with
//   cd chattemplate/testdata/ardancmp && go test -count=1 -v .
// v1.8.0 is the newest release that builds with berth's Go (1.26; later
// ones need Go 1.27).
module github.com/berth-sh/berth/chattemplate/testdata/ardancmp

go 1.26.8

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/berth-sh/berth v0.0.0
)

require golang.org/x/text v0.42.0 // indirect

replace github.com/berth-sh/berth => ../../..
