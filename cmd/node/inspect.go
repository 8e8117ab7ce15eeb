package main

import "context"

// TODO: owned by the inspect work.
func runInspect(ctx context.Context, a *app, args []string) error { return nil }
