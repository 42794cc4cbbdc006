// Package integration tests Cairn through real `cairn serve` processes on
// 127.0.0.1: the binary is built once by TestMain, every test starts its own
// cluster on free ports with data under t.TempDir(), and every process is
// killed when the test ends. All waits are bounded polls.
package integration
