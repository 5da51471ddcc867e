package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// cpuMeter measures the CPU time spent while a burn-down runs: by this
// process (the workers of every in-process system run here) and by the
// rest of the machine, which during a burn-down is mostly the PostgreSQL
// server (other sessions' load shows up there too, so compare it between
// systems of one run). It tells which of the two processes a cost, or a
// change in it, belongs to.
type cpuMeter struct {
	self, machine float64 // seconds at the start
}

// startCPU reads both clocks.
func startCPU() (cpuMeter, error) {
	self, err := procCPU(os.Getpid())
	if err != nil {
		return cpuMeter{}, err
	}
	machine, err := machineBusy()
	if err != nil {
		return cpuMeter{}, err
	}
	return cpuMeter{self: self, machine: machine}, nil
}

// perJob returns the microseconds of CPU per job since start: this
// process's, and the rest of the machine's.
func (m cpuMeter) perJob(jobs int) (self, rest float64, err error) {
	s, err := procCPU(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	all, err := machineBusy()
	if err != nil {
		return 0, 0, err
	}
	ds, dall := s-m.self, all-m.machine
	return ds * 1e6 / float64(jobs), max(0, dall-ds) * 1e6 / float64(jobs), nil
}

// machineBusy returns the seconds every CPU of the machine has spent busy
// (neither idle nor waiting for I/O) since boot, from /proc/stat.
func machineBusy() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for i, s := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d: %w", i+2, err)
		}
		busy += v
	}
	return float64(busy) / clockTicks, nil
}
