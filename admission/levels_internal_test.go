package admission

import (
	"testing"
	"time"
)

// PRI-003 for queues with many levels: their level counts come from the
// ready stream's consumer list (listLevels), a page of 256 infos sorted by
// name. Whatever offset it starts from (a stale guess, past the end, in
// the middle of the queue's consumers), it finds every consumer of the
// queue, none of another queue sharing its name's prefix (m and m_1),
// across pages, and reports levels without a consumer as missing.
func TestListLevelsFromAnyOffset_PRI003(t *testing.T) {
	t.Parallel()
	ctx, svc := newInternalService(t, time.Minute)
	var reg []int
	for p := range 100 {
		reg = append(reg, p)
	}
	for _, q := range []string{"a", "m", "m_1", "z"} {
		for _, p := range reg {
			if _, err := svc.consumer(ctx, q, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := append(reg[:len(reg):len(reg)], 150) // 150 has no consumer
	for _, from := range []int{0, 1, 99, 100, 101, 150, 199, 200, 201, 255, 256, 300, 399, 1000} {
		infos, next, err := svc.listLevels(ctx, "m", want, from)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != len(want) {
			t.Fatalf("from %d: %d levels, want %d", from, len(infos), len(want))
		}
		for _, p := range want {
			if in := infos[p]; in.missing != (p == 150) {
				t.Fatalf("from %d: level %d missing %v", from, p, in.missing)
			}
		}
		// "a" holds the first 100 names, so m's consumers start at 100.
		if next != 99 {
			t.Fatalf("from %d: next guess %d, want 99", from, next)
		}
	}
}
