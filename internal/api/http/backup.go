package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-db/cairn/internal/kv"
)

// Backuper is implemented by backends that can stream a shard's data.
type Backuper interface {
	Backup(ctx context.Context, shard uint64, w io.Writer) error
}

// maxBackupRun bounds one shard's backup stream.
const maxBackupRun = time.Hour

// adminBackup serves GET /v1/admin/backup/shards/{id}: the shard's data
// from this node's replica after a read index, as a wire backup stream
// (application/octet-stream). The stream can be far larger than any
// answer the HTTP/1.1 server holds, so it is served over HTTP/2 only
// (h2c, or h2 over TLS); an HTTP/1.1 request gets 426.
func (a *api) adminBackup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	id, err := strconv.ParseUint(strings.TrimPrefix(r.URL.Path, "/v1/admin/backup/shards/"), 10, 64)
	if err != nil || id == 0 {
		badRequest(w, "the path must be /v1/admin/backup/shards/{id} with a shard id (a positive integer)")
		return
	}
	b, ok := a.b.(Backuper)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "this node cannot take backups")
		return
	}
	if r.ProtoMajor < 2 {
		writeError(w, http.StatusUpgradeRequired, "http2_required",
			"a shard backup is a long stream: ask for it over HTTP/2 (h2c prior knowledge, or h2 over TLS), as cairn backup does")
		return
	}
	release, ok := a.scanSlot(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := a.runContext(r.Context(), maxBackupRun)
	defer cancel()
	cw := &countingWriter{w: w}
	w.Header().Set("Content-Type", "application/octet-stream")
	err = b.Backup(ctx, id, cw)
	switch {
	case err == nil:
	case cw.n > 0:
		// The status is sent; the stream stops without its end, which the
		// reader detects.
		a.cfg.Logger.Warn("backup stream cut", "shard", id, "bytes", cw.n, "err", err)
	case errors.Is(err, kv.ErrNoReplica):
		writeError(w, http.StatusNotFound, "no_replica", err.Error())
	default:
		writeBackendError(w, a.cfg.Logger, err)
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
