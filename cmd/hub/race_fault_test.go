//go:build fault && race

package main

func init() { raceEnabled = true }
