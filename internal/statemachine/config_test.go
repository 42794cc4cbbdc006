package statemachine

import (
	"strings"
	"testing"

	"github.com/cairn-db/cairn/internal/storage"
)

func TestConfigDefaultsAndValidate(t *testing.T) {
	eng := &storage.Engine{}
	c := Config{ShardID: 1, Engine: eng}.EnsureDefaults()
	if c.DedupTTL != DefaultDedupTTL || c.VersionCache != 65536 || c.Logger == nil {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a filled config does not validate: %v", err)
	}
	for _, bad := range []struct {
		c    Config
		want string
	}{
		{Config{ShardID: 1}, "Engine"},
		{Config{Engine: eng}, "ShardID"},
		{Config{ShardID: 1, Engine: eng, Start: 10, End: 10}, "empty"},
		{Config{ShardID: 1, Engine: eng, DedupTTL: -1}, "DedupTTL"},
	} {
		err := bad.c.EnsureDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.HasPrefix(err.Error(), "statemachine: ") {
			t.Errorf("%+v: %v, want an error naming %s", bad.c, err, bad.want)
		}
	}
}
