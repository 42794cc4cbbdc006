package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/spf13/cobra"
)

type kvOpts struct {
	endpoints    string
	serializable bool
	ifMatch      uint64
	ifAbsent     bool
	timeout      time.Duration
	verbose      bool
}

func newKVCmd() *cobra.Command {
	var o kvOpts
	cmd := &cobra.Command{Use: "kv", Short: "Read and write keys through the v1 HTTP API"}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.endpoints, "endpoints", "http://127.0.0.1:8080,http://127.0.0.1:8081,http://127.0.0.1:8082", "node URLs; the client fails over between them")
	pf.DurationVar(&o.timeout, "timeout", 5*time.Second, "deadline of the operation, retries included")
	pf.BoolVarP(&o.verbose, "verbose", "v", false, "print the version on stderr")
	get := &cobra.Command{Use: "get KEY", Short: "Print a key's value", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			v, err := c.Get(cmd.Context(), []byte(args[0]), o.serializable)
			if err != nil {
				return kvErr(err)
			}
			if o.verbose {
				fmt.Fprintln(cmd.ErrOrStderr(), "version", v.Version)
			}
			_, err = cmd.OutOrStdout().Write(v.Value)
			return err
		}}
	get.Flags().BoolVar(&o.serializable, "serializable", false, "read from one replica (may be stale)")
	put := &cobra.Command{Use: "put KEY VALUE", Short: "Write a key (VALUE - reads stdin); prints the new version", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			val := []byte(args[1])
			if args[1] == "-" {
				var err error
				if val, err = io.ReadAll(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			ver, err := c.Put(cmd.Context(), []byte(args[0]), val, client.PutOptions{IfVersion: o.ifMatch, IfAbsent: o.ifAbsent})
			if err != nil {
				return kvErr(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), ver)
			return nil
		}}
	put.Flags().Uint64Var(&o.ifMatch, "if-match", 0, "write only if the current version is N")
	put.Flags().BoolVar(&o.ifAbsent, "if-absent", false, "write only if the key does not exist")
	del := &cobra.Command{Use: "del KEY", Short: "Delete a key", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.Delete(cmd.Context(), []byte(args[0]), o.ifMatch); err != nil {
				return kvErr(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "deleted")
			return nil
		}}
	del.Flags().Uint64Var(&o.ifMatch, "if-match", 0, "delete only if the current version is N")
	cmd.AddCommand(get, put, del)
	return cmd
}

func (o *kvOpts) client() (*client.Client, error) {
	c, err := client.New(strings.Split(o.endpoints, ","), client.Options{Timeout: o.timeout})
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

func kvErr(err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return errors.New("not found")
	}
	return err
}
