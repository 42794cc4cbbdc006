package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envName is the environment variable that sets a flag: CAIRN_<FLAG>.
func envName(flag string) string {
	return "CAIRN_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag of cmd not given on the command line from its
// CAIRN_<FLAG> environment variable, if set.
func applyEnv(cmd *cobra.Command) error {
	var firstErr error
	set := func(f *pflag.Flag) {
		if f.Changed || firstErr != nil {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			firstErr = usageError{fmt.Errorf("%s=%q: %w", envName(f.Name), v, err)}
			return
		}
		f.Changed = true
	}
	cmd.Flags().VisitAll(set)
	cmd.InheritedFlags().VisitAll(set)
	return firstErr
}
