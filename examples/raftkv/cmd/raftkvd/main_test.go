package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/require"
)

// TestHTTP runs a one-node group over the TCP transport, with the file
// snapshot store and the adaptkv log store, behind the HTTP API.
func TestHTTP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	n, closeNode, err := start("n1", t.TempDir(), addr)
	require.NoError(t, err)
	defer func() { require.NoError(t, closeNode()) }()
	require.NoError(t, n.Bootstrap([]raft.Server{{ID: "n1", Address: raft.ServerAddress(addr)}}))
	require.Eventually(t, func() bool { return n.Raft.State() == raft.Leader }, 10*time.Second, 10*time.Millisecond)
	srv := httptest.NewServer(handler(n))
	defer srv.Close()

	do := func(method, path, body string) (int, string) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		code, _ := do("PUT", "/kv/"+k, "value-"+k)
		require.Equal(t, http.StatusOK, code)
	}
	code, body := do("GET", "/kv/b?consistent=1", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "value-b", body)
	code, _ = do("POST", "/delete-range?start=b&end=d", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = do("GET", "/kv/c", "")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = do("DELETE", "/kv/a", "")
	require.Equal(t, http.StatusOK, code)
	code, _ = do("GET", "/kv/a", "")
	require.Equal(t, http.StatusNotFound, code)
	code, body = do("GET", "/kv/d", "")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "value-d", body)
	code, _ = do("POST", "/delete-range?start=d&end=a", "")
	require.Equal(t, http.StatusBadRequest, code)
	code, body = do("GET", "/status", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "state Leader")
	require.NoError(t, n.Raft.Snapshot().Error(), "a snapshot through the file snapshot store")
}
