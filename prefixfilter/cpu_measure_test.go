package prefixfilter

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /*RUSAGE_THREAD*/, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestCPUMeasure(t *testing.T) {
	if os.Getenv("PF_CPU") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	n := 1 << 20
	keys := presentKeys(n)
	absent := absentKeys()
	for _, bf := range benchFilters {
		var f benchFilter
		best := time.Hour
		for r := 0; r < 7; r++ {
			runtime.GC()
			s := threadCPU()
			f = bf.build(keys)
			if d := threadCPU() - s; d < best {
				best = d
			}
		}
		bp, bn := time.Hour, time.Hour
		for r := 0; r < 5; r++ {
			s := threadCPU()
			for i := 0; i < 4*n; i++ {
				f.mayContain(keys[i&(n-1)])
			}
			if d := threadCPU() - s; d < bp {
				bp = d
			}
			s = threadCPU()
			for i := 0; i < 4*n; i++ {
				f.mayContain(absent[i&(benchQueryKeys-1)])
			}
			if d := threadCPU() - s; d < bn {
				bn = d
			}
		}
		t.Logf("%-8s build %.2f ns/key  pos %.2f ns  neg %.2f ns", bf.name, float64(best)/float64(n), float64(bp)/float64(4*n), float64(bn)/float64(4*n))
	}
}
