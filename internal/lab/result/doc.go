// Package result holds what a lab run produces and reads back: the result
// file (results.json, per-operation CSVs), latency summaries, per-second
// series, and the Recorder that builds them from timed operations. It is a
// leaf of the lab: the bench, the chaos lab and the report builder all
// use it, and it pulls in no client of any database.
package result
