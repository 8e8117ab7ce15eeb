//go:build race

package train

// raceBuild: the race detector slows every memory access of Go code
// (about 10× here), so the real-data accuracy test evaluates less often
// and stops early under it, and runs CiteSeer only without it; it still
// trains the same model and asserts the same bar.
const raceBuild = true
