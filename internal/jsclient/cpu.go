package jsclient

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// processCPU is the CPU time process pid has used, user and system, from
// /proc/<pid>/stat; ok is false where there is no /proc or once it has
// gone.
func processCPU(pid int) (cpu time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The name, in parentheses, may hold spaces: fields count from the
	// last ')'. After it: state, ppid, …, utime (12th), stime (13th).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	user, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	sys, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(user+sys) * clockTick, true
}
