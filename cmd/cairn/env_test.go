package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestEnvName(t *testing.T) {
	if got := envName("max-value-size"); got != "CAIRN_MAX_VALUE_SIZE" {
		t.Fatalf("envName = %q", got)
	}
}

func newFlagCmd(port *int, dir *string) *cobra.Command {
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	cmd.Flags().IntVar(port, "http-port", 8080, "")
	cmd.Flags().StringVar(dir, "data-dir", "./d", "")
	return cmd
}

func TestApplyEnvSetsUnsetFlagsOnly(t *testing.T) {
	var port int
	var dir string
	cmd := newFlagCmd(&port, &dir)
	t.Setenv("CAIRN_HTTP_PORT", "9000")
	t.Setenv("CAIRN_DATA_DIR", "/from/env")
	if err := cmd.ParseFlags([]string{"--data-dir", "/from/flag"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if port != 9000 {
		t.Fatalf("port %d: env not applied", port)
	}
	if dir != "/from/flag" {
		t.Fatalf("dir %q: env overrode the command line", dir)
	}
}

func TestApplyEnvRejectsBadValue(t *testing.T) {
	var port int
	var dir string
	cmd := newFlagCmd(&port, &dir)
	t.Setenv("CAIRN_HTTP_PORT", "eighty")
	_ = cmd.ParseFlags(nil)
	err := applyEnv(cmd)
	if err == nil || !strings.Contains(err.Error(), "CAIRN_HTTP_PORT") || exitCode(err) != 2 {
		t.Fatalf("bad env value: %v", err)
	}
}

func TestServeRejectsBadCluster(t *testing.T) {
	root := newRootCmd()
	root.SetArgs([]string{"serve", "--node-id", "1", "--initial-cluster", "x=1", "--data-dir", t.TempDir()})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "initial-cluster") {
		t.Fatalf("bad --initial-cluster: %v", err)
	}
}
