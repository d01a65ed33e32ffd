package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/suanli/suanli"
	"github.com/suanli/suanli/control"
)

// TestBudgetHardStopEndToEnd: a budget of a few hundredths of a cent with a
// hard stop stops a running instance of the real binary, and the webhook
// receives the signed 80% and 100% alerts.
func TestBudgetHardStopEndToEnd(t *testing.T) {
	var mu sync.Mutex
	var thresholds []int
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Suanli-Signature") != control.WebhookSignature("hook-secret", body) {
			t.Errorf("webhook signature does not verify")
		}
		var p struct {
			Alert suanli.Alert `json:"alert"`
		}
		json.Unmarshal(body, &p)
		mu.Lock()
		thresholds = append(thresholds, p.Alert.Threshold)
		mu.Unlock()
	}))
	defer hook.Close()
	m, _ := startUp(t, t.TempDir())
	if _, err := m.run("budget", "set", "tiny", "--scope", "project:demo", "--amount", "0.0004", "--action", "stop",
		"--webhook", hook.URL, "--webhook-secret", "hook-secret"); err != nil {
		t.Fatal(err)
	}
	var in suanli.Instance
	m.mustJSON(&in, "create", "1", "--image", "busybox", "--gpus", "1", "--project", "demo", "--", "sh", "-c", "sleep 600")
	id := fmt.Sprint(in.ID)
	waitStatus(t, m, id, suanli.StatusRunning, 20*time.Second)
	// $0.40/h spends $0.0004 in 3.6 s.
	stopped := waitStatus(t, m, id, suanli.StatusStopped, 30*time.Second)
	if !strings.Contains(stopped.StatusMessage, "budget") {
		t.Errorf("stopped with message %q, want the budget named", stopped.StatusMessage)
	}
	out, err := m.run("budget", "alerts")
	if err != nil || !strings.Contains(out, "100%") {
		t.Errorf("budget alerts = %q (%v)", out, err)
	}
	if _, err := m.run("start", id); err == nil || !strings.Contains(err.Error(), "budget") {
		t.Errorf("start with the budget spent: %v, want refused naming the budget", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := append([]int(nil), thresholds...)
		mu.Unlock()
		if containsInts(got, 80, 100) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook got thresholds %v, want 80 and 100", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func containsInts(xs []int, want ...int) bool {
	for _, w := range want {
		ok := false
		for _, x := range xs {
			ok = ok || x == w
		}
		if !ok {
			return false
		}
	}
	return true
}
