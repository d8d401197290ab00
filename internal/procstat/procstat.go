// Package procstat reads a process's /proc/<pid>/stat on Linux: its
// parent and its CPU time, for the bench's samplers, the test cluster's
// process list and the sandbox's kill timer, and any stat file's fields.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTick is USER_HZ, the unit of utime and stime. Linux fixes it at
// 100 for every architecture Go runs on.
const ClockTick = 10 * time.Millisecond

// Indexes into Fields' result (the stat file's fields 4, 14, 15, 19 and
// 24).
const (
	PPID  = 1
	UTime = 11
	STime = 12
	Nice  = 16
	RSS   = 21
)

// Fields returns the fields of a stat file (/proc/<pid>/stat, or a
// thread's /proc/<pid>/task/<tid>/stat) after the command name, which may
// hold spaces: the first is field 3, the state.
func Fields(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) <= RSS {
		return nil, fmt.Errorf("%s: %d fields", path, len(f))
	}
	return f, nil
}

// stat is process pid's Fields.
func stat(pid int) ([]string, error) {
	return Fields("/proc/" + strconv.Itoa(pid) + "/stat")
}

// CPU is process pid's user plus system CPU time.
func CPU(pid int) (time.Duration, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	user, err1 := strconv.ParseInt(f[UTime], 10, 64)
	sys, err2 := strconv.ParseInt(f[STime], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("process %d's CPU time: %w", pid, err)
	}
	return time.Duration(user+sys) * ClockTick, nil
}

// Resident is process pid's resident memory, in bytes.
func Resident(pid int) (int64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	pages, err := strconv.ParseInt(f[RSS], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("process %d's resident memory: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// PeakResident is the most resident memory process pid has held, in bytes
// (VmHWM in /proc/<pid>/status).
func PeakResident(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("process %d's peak resident memory: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("process %d: no VmHWM", pid)
}

// Parent is process pid's parent's pid.
func Parent(pid int) (int, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[PPID])
}
