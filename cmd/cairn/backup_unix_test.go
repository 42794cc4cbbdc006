//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/wire"
)

// `cairn backup` interrupted (Ctrl-C) while a shard streams removes what
// it wrote and says it was interrupted; before, the signal killed it and
// the target kept the shard files written so far, without a manifest.
func TestBackupInterruptedLeavesNothing(t *testing.T) {
	streaming := make(chan struct{}, 1)
	var srv *httptest.Server
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/cluster":
			_ = json.NewEncoder(w).Encode(client.ClusterInfo{NodeID: 1, Replication: 1,
				Members: []client.MemberInfo{{NodeID: 1, HTTPAddr: srv.Listener.Addr().String(), Reachable: true}},
				Shards:  []client.ShardInfo{{ID: 1, TokenStart: "0", TokenEnd: "10000000000000000", Epoch: 1, Replicas: []uint64{1}, Leader: 1}}})
		case "/v1/admin/backup/shards/1":
			bw, err := wire.NewBackupWriter(w, wire.BackupHeader{Shard: 1, Epoch: 1, Applied: 3})
			if err != nil {
				return
			}
			_ = bw.Add([]byte("a"), 1, nil, []byte("v"))
			w.(http.Flusher).Flush()
			streaming <- struct{}{}
			<-r.Context().Done()
		default:
			http.NotFound(w, r)
		}
	}))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	defer srv.Close()

	parent := t.TempDir()
	dir := filepath.Join(parent, "b")
	root := newRootCmd()
	root.SetOut(&strings.Builder{})
	root.SetErr(&strings.Builder{})
	root.SetArgs([]string{"backup", "--endpoint", srv.URL, "--to", dir})
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	select {
	case <-streaming:
	case err := <-done:
		t.Fatalf("backup ended before its shard streamed: %v", err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Fatalf("interrupted backup: %v, want an error saying so", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an interrupted backup did not stop")
	}
	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 0 {
		t.Fatalf("after an interrupted backup, the target's parent holds %v (%v), want nothing", ents, err)
	}
}
