package storage

import (
	"strings"
	"testing"
)

func TestOptionsDefaultsAndValidate(t *testing.T) {
	o := Options{}.EnsureDefaults()
	if o.CacheSize != DefaultCacheSize || o.MemTableSize != DefaultMemTableSize {
		t.Fatalf("defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, bad := range map[string]Options{
		"MemTableSize 1024": {MemTableSize: 1024},
		"4 GiB":             {MemTableSize: 4 << 30},
	} {
		if err := bad.EnsureDefaults().Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
		if _, err := Open(t.TempDir(), bad); err == nil {
			t.Errorf("%s: Open accepted the options", want)
		}
	}
}
