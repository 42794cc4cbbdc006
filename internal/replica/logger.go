package replica

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// raftLogger sends raft's own log lines through slog: its info lines at
// debug level, warnings and errors as such.
type raftLogger struct{ l *slog.Logger }

func newRaftLogger(l *slog.Logger) *raftLogger { return &raftLogger{l: l.With("component", "raft")} }

func (r *raftLogger) log(level slog.Level, msg string) { r.l.Log(context.Background(), level, msg) }

func (r *raftLogger) Debug(v ...interface{}) { r.log(slog.LevelDebug-4, fmt.Sprint(v...)) }
func (r *raftLogger) Debugf(format string, v ...interface{}) {
	r.log(slog.LevelDebug-4, fmt.Sprintf(format, v...))
}
func (r *raftLogger) Info(v ...interface{}) { r.log(slog.LevelDebug, fmt.Sprint(v...)) }
func (r *raftLogger) Infof(format string, v ...interface{}) {
	r.log(slog.LevelDebug, fmt.Sprintf(format, v...))
}
func (r *raftLogger) Warning(v ...interface{}) { r.log(slog.LevelWarn, fmt.Sprint(v...)) }
func (r *raftLogger) Warningf(format string, v ...interface{}) {
	r.log(slog.LevelWarn, fmt.Sprintf(format, v...))
}
func (r *raftLogger) Error(v ...interface{}) { r.log(slog.LevelError, fmt.Sprint(v...)) }
func (r *raftLogger) Errorf(format string, v ...interface{}) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
}
func (r *raftLogger) Fatal(v ...interface{}) {
	r.log(slog.LevelError, fmt.Sprint(v...))
	os.Exit(1)
}
func (r *raftLogger) Fatalf(format string, v ...interface{}) {
	r.log(slog.LevelError, fmt.Sprintf(format, v...))
	os.Exit(1)
}
func (r *raftLogger) Panic(v ...interface{})                 { panic(fmt.Sprint(v...)) }
func (r *raftLogger) Panicf(format string, v ...interface{}) { panic(fmt.Sprintf(format, v...)) }
