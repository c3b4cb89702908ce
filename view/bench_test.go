package view_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berth-sh/berth/results"
	"github.com/berth-sh/berth/results/resultstest"
	"github.com/berth-sh/berth/view"
)

// BenchmarkJobPage10k renders the job page of a synthetic job of 10,000
// trials (2,500 tasks x 4 attempts, every tenth an error) as the server
// does: read every result.json, aggregate, sort by reward, render page 1.
// "cold" reads with a fresh Library each time (the first view of a job);
// "warm" reuses one, as a running `berth view` does (it rereads only
// result.json files whose size or mtime changed).
//
//	go test ./view -run '^$' -bench JobPage10k -benchtime 10x
func BenchmarkJobPage10k(b *testing.B) {
	jobs := b.TempDir()
	trials := make([]resultstest.Trial, 10000)
	for i := range trials {
		tr := resultstest.Trial{Task: fmt.Sprintf("task-%04d", i/4), Attempt: i%4 + 1, Rewards: resultstest.Reward(float64(i%3) / 2),
			Phases: []time.Duration{time.Duration(i%97) * time.Millisecond, 0, time.Duration(i%1009) * time.Millisecond, 300 * time.Millisecond, 50 * time.Millisecond}}
		if i%10 == 0 {
			tr.Error, tr.Message = []string{"AgentTimeoutError", "RewardFileNotFoundError", "EnvironmentError"}[i%3], "synthetic"
		}
		trials[i] = tr
	}
	resultstest.Job(b, jobs, "big", true, time.Time{}, trials)
	page := "/jobs/0/big/?sort=reward&dir=desc"
	serve := func(b *testing.B, lib *results.Library) {
		s, err := view.New(lib, view.Options{})
		if err != nil {
			b.Fatal(err)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, page, nil)
		req.Host = "127.0.0.1:8321"
		s.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Body.Len() < 10000 {
			b.Fatalf("status %d, %d bytes", rec.Code, rec.Body.Len())
		}
		b.ReportMetric(float64(rec.Body.Len())/1024, "KiB/page")
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			lib, err := results.Open(jobs)
			if err != nil {
				b.Fatal(err)
			}
			serve(b, lib)
			lib.Close()
		}
	})
	b.Run("warm", func(b *testing.B) {
		lib, err := results.Open(jobs)
		if err != nil {
			b.Fatal(err)
		}
		defer lib.Close()
		serve(b, lib)
		for b.Loop() {
			serve(b, lib)
		}
	})
}
