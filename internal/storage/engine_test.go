package storage

import "testing"

// The block cache has the size asked for, and DefaultCacheSize when none
// (or a negative one) is given.
func TestOpenSizesBlockCache(t *testing.T) {
	for _, tc := range []struct{ ask, want int64 }{
		{0, DefaultCacheSize},
		{-1, DefaultCacheSize},
		{8 << 20, 8 << 20},
	} {
		e, err := Open(t.TempDir(), Options{CacheSize: tc.ask})
		if err != nil {
			t.Fatal(err)
		}
		got := e.cache.MaxSize()
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Fatalf("asked %d: cache of %d bytes, want %d", tc.ask, got, tc.want)
		}
	}
}
