package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"time"
)

// A hub built with -tags pprof serves net/http/pprof where CREWLET_PPROF
// says. With --profile, each hub row is profiled over its measured window:
// the CPU profile, and the allocations made in that window (a delta
// profile), saved as NAME.cpu.pprof and NAME.allocs.pprof for
// `go tool pprof`; beside them NAME.client.cpu.pprof, this process's own
// CPU over the same window, since the client sessions share the machine
// with the hub and what they spend bounds the calls/s as much as the hub.

type profiling struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
	client *os.File // this process's CPU profile, until wait stops it
}

// startProfiles asks for both profiles of the next d; the warm-up calls of
// the row fall inside a little of it, which a few hundred calls do not
// move.
func startProfiles(ctx context.Context, addr, name string, d time.Duration) *profiling {
	p := &profiling{}
	if f, err := os.Create(name + ".client.cpu.pprof"); err != nil {
		p.errs = append(p.errs, err)
	} else if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		p.errs = append(p.errs, err)
	} else {
		p.client = f
	}
	secs := max(int(d.Seconds()), 1)
	for _, f := range []struct{ path, file string }{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs), name + ".cpu.pprof"},
		{fmt.Sprintf("/debug/pprof/allocs?seconds=%d", secs), name + ".allocs.pprof"},
	} {
		p.wg.Go(func() {
			if err := fetchTo(ctx, "http://"+addr+f.path, f.file, d+30*time.Second); err != nil {
				p.mu.Lock()
				p.errs = append(p.errs, err)
				p.mu.Unlock()
			}
		})
	}
	return p
}

func (p *profiling) wait() error {
	p.wg.Wait()
	if p.client != nil {
		pprof.StopCPUProfile()
		if err := p.client.Close(); err != nil {
			p.errs = append(p.errs, err)
		}
	}
	if len(p.errs) > 0 {
		return p.errs[0]
	}
	return nil
}

func fetchTo(ctx context.Context, url, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (was the hub built with -tags pprof?)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// freeAddr picks a free loopback address for the hub's profiles.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// saveStall saves what the hub's goroutines and this process's are doing
// while a call goes unanswered, as NAME.stall.hub.txt and
// NAME.stall.client.txt: which side holds the call.
func saveStall(ctx context.Context, addr, name string) error {
	hubErr := fetchTo(ctx, "http://"+addr+"/debug/pprof/goroutine?debug=2", name+".stall.hub.txt", 10*time.Second)
	f, err := os.Create(name + ".stall.client.txt")
	if err != nil {
		return errors.Join(hubErr, err)
	}
	err = pprof.Lookup("goroutine").WriteTo(f, 2)
	return errors.Join(hubErr, err, f.Close())
}
