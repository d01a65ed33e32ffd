// Command beat is the workload of the multi-host tests. Every 100ms it
// rewrites the file "beat" in its working directory (so that a test reading
// the agents' directories from outside sees which copies of a rental run
// now: a frozen copy stops beating), and, with -log DIR, appends to
// DIR/$SUANLI_INSTANCE_ID.log one line per event: "<unix ns> s" when it
// starts, "<unix ns> b" at each beat, "<unix ns> t" when SIGTERM ends it. The
// log outlives the instance's directory, so a test can tell exactly when
// every copy of a rental ran. It exits 0 on SIGTERM, unless -ignore-term is
// given (then only SIGKILL ends it).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	ignore := flag.Bool("ignore-term", false, "ignore SIGTERM")
	every := flag.Duration("every", 100*time.Millisecond, "beat interval")
	logDir := flag.String("log", "", "append events to DIR/$SUANLI_INSTANCE_ID.log")
	flag.Parse()
	var log *os.File
	if *logDir != "" {
		os.MkdirAll(*logDir, 0o755)
		f, err := os.OpenFile(filepath.Join(*logDir, os.Getenv("SUANLI_INSTANCE_ID")+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		log = f
	}
	event := func(kind string) {
		if log != nil {
			fmt.Fprintf(log, "%d %s\n", time.Now().UnixNano(), kind)
		}
	}
	sig := make(chan os.Signal, 1)
	if *ignore {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	}
	event("s")
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		os.WriteFile("beat", []byte(fmt.Sprintln(time.Now().UnixNano())), 0o644)
		select {
		case <-sig:
			os.Remove("beat")
			event("t")
			os.Exit(0)
		case <-t.C:
			event("b")
		}
	}
}
