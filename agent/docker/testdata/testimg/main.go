// Command testimg is the workload of the docker runtime's tests, built
// static into a FROM scratch image. One binary, several verbs:
//
//	testimg serve           print greetings to stdout and stderr, serve HTTP on :8080:
//	                        /id (the instance id), /blob?n=N (N zero bytes),
//	                        /write?n=N (write N bytes to /vol/written and sync)
//	testimg write FILE TEXT write TEXT to FILE
//	testimg cat FILE        print FILE
//	testimg exit N          exit with code N
//	testimg dial ADDR       exit 0 when a TCP connection to ADDR opens within 2 s, else 1
//	testimg env NAME        print the environment variable NAME
//	testimg stdin           copy stdin to stdout
//	testimg tty             on a terminal: print its size and TERM, then each new
//	                        size on SIGWINCH, until a line "bye" comes in
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testimg serve|write|cat|exit|dial|env|stdin|tty")
		os.Exit(2)
	}
	arg := func(i int) string {
		if len(os.Args) <= i {
			fmt.Fprintf(os.Stderr, "%s: missing argument %d\n", os.Args[1], i-1)
			os.Exit(2)
		}
		return os.Args[i]
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "write":
		if err := os.WriteFile(arg(2), []byte(arg(3)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "cat":
		b, err := os.ReadFile(arg(2))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Stdout.Write(b)
	case "exit":
		n, _ := strconv.Atoi(arg(2))
		fmt.Printf("exiting with %d\n", n)
		os.Exit(n)
	case "dial":
		c, err := net.DialTimeout("tcp", arg(2), 2*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("connected")
	case "env":
		fmt.Print(os.Getenv(arg(2)))
	case "stdin":
		io.Copy(os.Stdout, os.Stdin)
	case "tty":
		tty()
	default:
		fmt.Fprintf(os.Stderr, "unknown verb %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve() {
	id := os.Getenv("SUANLI_INSTANCE_ID")
	fmt.Printf("hello from instance %s\n", id)
	fmt.Fprintf(os.Stderr, "stderr of instance %s\n", id)
	http.HandleFunc("/id", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, id) })
	http.HandleFunc("/blob", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		buf := make([]byte, 32<<10)
		for n > 0 {
			k := min(n, len(buf))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	http.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		f, err := os.Create("/vol/written")
		if err == nil {
			_, err = f.Write(make([]byte, n))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "wrote %d", n)
	})
	go func() {
		if err := http.ListenAndServe(":8080", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	fmt.Println("got SIGTERM, bye")
}

// tty reports the terminal the command runs on: "tty COLSxROWS TERM" at
// start, "winch COLSxROWS" on every window change, and exits 0 when a line
// "bye" comes in; "no tty" and exit 3 when stdin is not a terminal.
func tty() {
	size := func() (string, bool) {
		ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
		if err != nil {
			return "", false
		}
		return fmt.Sprintf("%dx%d", ws.Col, ws.Row), true
	}
	// Listen before saying anything: a window change that comes as soon as
	// the first line is read must not be lost.
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	sz, ok := size()
	if !ok {
		fmt.Println("no tty")
		os.Exit(3)
	}
	fmt.Printf("tty %s %s\n", sz, os.Getenv("TERM"))
	go func() {
		for range winch {
			sz, _ := size()
			fmt.Printf("winch %s\n", sz)
		}
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "bye" {
			fmt.Println("bye")
			return
		}
	}
	os.Exit(4)
}
