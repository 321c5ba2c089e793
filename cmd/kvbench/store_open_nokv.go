//go:build !kvready

package main

// This file stands in for store_kv.go until the kv package builds.

// kvPolicies lists the adaptkv filter policies of this build: none.
func kvPolicies() []string { return nil }

func openKV(name string, cfg StoreConfig) (Store, error) { return nil, ErrUnknownStore }
