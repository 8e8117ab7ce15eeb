package main

import "context"

// TODO: owned by the gen work.
func runGen(ctx context.Context, a *app, args []string) error { return nil }
