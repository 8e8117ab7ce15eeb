package main

import "context"

// TODO: owned by the partition work.
func runPartition(ctx context.Context, a *app, args []string) error { return nil }
