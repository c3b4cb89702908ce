package pid1

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
)

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

func unixGet(sock, path string) (string, error) {
	resp, err := unixClient(sock).Get("http://agent" + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func unixPut(sock, body string) (int, error) {
	req, _ := http.NewRequest(http.MethodPut, "http://agent"+ControlPath, strings.NewReader(body))
	resp, err := unixClient(sock).Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
