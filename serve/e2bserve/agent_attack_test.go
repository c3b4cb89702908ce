package e2bserve

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth/e2bapi"
)

// TestAgentControlUnreachableThroughServe is the attack against the real
// in-sandbox agent: a key holder with a local sandbox's access token sends
// every spelling of the agent's deadline route (it answers 200 on its
// socket) to the data plane, routed by E2b-Sandbox-Id. Nothing reaches it;
// envd's own routes still do. On 6f9918d the proxy forwarded these and the
// agent answered them: checked there, this test failed. Root and runc.
func TestAgentControlUnreachableThroughServe(t *testing.T) {
	e := newEnvOver(t, openLocal(t), bashImage, nil)
	sb := e.Create(testKey, map[string]any{"timeout": 60})
	addr := strings.TrimPrefix(e.URL, "http://")
	send := func(method, target string) int {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"deadline":""}`
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\n%s: %s\r\n%s: %s\r\nX-Access-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			method, target, addr, e2bapi.SandboxIDHeader, sb.SandboxID, e2bapi.SandboxPortHeader, e2bapi.EnvdPort, sb.EnvdAccessToken, len(body), body)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, target := range []string{
		"/berth.agent/deadline", "//berth.agent/deadline", "/./berth.agent/deadline",
		"/files/../berth.agent/deadline", "/berth%2Eagent/deadline", "/berth.agent%2Fdeadline",
		"/%62erth.agent/deadline", "/BERTH.AGENT/DEADLINE", "/berth.agent/deadline/",
		"/health/../berth.agent/deadline", "/process.Process/%2e%2e/berth.agent/deadline",
	} {
		for _, m := range []string{"GET", "PUT"} {
			if st := send(m, target); st == http.StatusOK {
				t.Errorf("%s %s reached the agent (200)", m, target)
			}
		}
	}
	if st := send("GET", "/health"); st/100 != 2 {
		t.Errorf("GET /health through the data plane: %d", st)
	}
	if r := e.Call("DELETE", "/sandboxes/"+sb.SandboxID, testKey, nil, nil); r.Status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", r.Status, r.Body)
	}
}
