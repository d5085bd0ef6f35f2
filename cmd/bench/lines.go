package main

import "github.com/foldstream/foldstream/internal/benchtext"

// benchLines are what the ingest section's turns say, in turn
// (benchtext.Lines).
var benchLines = benchtext.Lines()
