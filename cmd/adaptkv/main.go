// Command adaptkv looks inside an adaptkv store on disk, read-only, as
// Pebble's `pebble lsm`, `pebble sstable` and `pebble db check` do:
//
//	adaptkv lsm DIR                   the levels, their tables and filters
//	adaptkv sstable FILE...           one table: properties, keys, filter, adaptive state, checksums
//	adaptkv check DIR                 read everything; exit status 1 and the damaged file named on damage
//	adaptkv get DIR KEY               the value (exit status 1 when absent)
//	adaptkv scan DIR [START [END]]    keys and values (--keys-only, --limit N)
//	adaptkv manifest DIR              the manifest's edits in order
//
// Keys and values print as text when every byte is printable ASCII, else
// as hex:<hex digits>; keys given as hex:<hex digits> are decoded. A store
// is opened with kv.Options.ReadOnly, which changes no file; one a running
// process holds is refused at once (kv.ErrLocked), not waited for.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Exit statuses: a key absent (get) or damage found (check, sstable) is 1,
// a usage error 2, any other failure 1 too.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// command is one subcommand: its usage line and what it does with the
// positional arguments left after its flags.
type command struct {
	usage string
	run   func(c *cli, args []string) error
}

// cli carries the output streams and the parsed flags of one invocation.
type cli struct {
	out, errOut io.Writer
	keysOnly    bool
	limit       int
}

// errUsage marks a wrong command line (exit status 2).
var errUsage = errors.New("usage")

// errAbsent marks a get of an absent key (exit status 1, no message but
// "not found").
var errAbsent = errors.New("not found")

var commands = map[string]command{
	"lsm":      {usage: "lsm DIR", run: (*cli).lsm},
	"sstable":  {usage: "sstable FILE...", run: (*cli).sstable},
	"check":    {usage: "check DIR", run: (*cli).check},
	"get":      {usage: "get DIR KEY", run: (*cli).get},
	"manifest": {usage: "manifest DIR", run: (*cli).manifest},
	"scan":     {usage: "scan DIR [START [END]] [--keys-only] [--limit N]", run: (*cli).scan},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: adaptkv COMMAND ARGS (read-only; keys as text or hex:<digits>)")
	for _, name := range []string{"lsm", "sstable", "check", "get", "scan", "manifest"} {
		fmt.Fprintln(w, "  adaptkv", commands[name].usage)
	}
}

// run executes one command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "adaptkv: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	c := &cli{out: stdout, errOut: stderr}
	fs := flag.NewFlagSet("adaptkv "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "usage: adaptkv", cmd.usage) }
	if args[0] == "scan" {
		fs.BoolVar(&c.keysOnly, "keys-only", false, "print the keys only")
		fs.IntVar(&c.limit, "limit", 0, "stop after N keys (0: no limit)")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err == nil {
		err = cmd.run(c, pos)
	}
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		fs.Usage()
		return exitUsage
	case errors.Is(err, errAbsent):
		fmt.Fprintln(stderr, "not found")
		return exitFail
	}
	fmt.Fprintln(stderr, "adaptkv:", err)
	return exitFail
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments (the flag package stops at the first positional one) and
// returns the positional ones in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
