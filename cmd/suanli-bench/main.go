// Command suanli-bench runs Suanli's benchmarks (DESIGN §8): programs with
// seeded generators and side-by-side baselines that check both sides give
// the same answers before they report a ratio.
//
//	go run ./cmd/suanli-bench place [flags]
//
// Each subcommand registers itself in commands from its own file.
package main

import (
	"fmt"
	"os"
	"slices"
)

// command is one benchmark.
type command struct {
	short string
	run   func(args []string) error
}

// commands holds the benchmarks by name; each file adds its own in init.
var commands = map[string]command{}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: suanli-bench COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, commands[n].short)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "suanli-bench: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "suanli-bench:", err)
		os.Exit(1)
	}
}
