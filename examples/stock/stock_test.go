package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redlock-go/redlock"
)

// pauseOnce stops instance 0 once, between its read and its write, until
// its lock's validity has ended and another instance has written the row
// with a later token: a GC pause or a stopped VM, made certain.
func pauseOnce(t *testing.T, db *pgxpool.Pool) func(*redlock.Lock) {
	var once sync.Once
	return func(l *redlock.Lock) {
		once.Do(func() {
			<-l.Done()
			waitFor(t, "a later holder's write", func() error {
				var fence int64
				if err := db.QueryRow(context.Background(), `SELECT fence FROM stock WHERE id = 'widget'`).Scan(&fence); err != nil {
					return err
				}
				if fence <= l.Token() {
					return context.DeadlineExceeded
				}
				return nil
			})
		})
	}
}

const units = 60

// TestFencedStockRefusesPausedInstance: with the fence column checked,
// the paused instance's write is refused and every unit is sold exactly
// once.
func TestFencedStockRefusesPausedInstance(t *testing.T) {
	db, urls := startPostgres(t), startRedis(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, db, urls, 4, units, true, pauseOnce(t, db))
	if err != nil {
		t.Fatal(err)
	}
	if r.Stale < 1 {
		t.Fatalf("%+v: the paused instance's write was not refused", r)
	}
	if r.Left != 0 || r.Orders != units {
		t.Fatalf("%+v: want %d orders and 0 left", r, units)
	}
}

// TestUnfencedStockOversells is the same run without the fence check in
// the UPDATE: the paused instance writes back the quantity it read before
// its pause, undoing sales made meanwhile, and more units are ordered than
// left the stock. It shows what the fenced test would catch.
func TestUnfencedStockOversells(t *testing.T) {
	db, urls := startPostgres(t), startRedis(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Run(ctx, db, urls, 4, units, false, pauseOnce(t, db))
	if err != nil {
		t.Fatal(err)
	}
	if r.Orders <= units-r.Left {
		t.Fatalf("%+v: expected an oversell without the fence check", r)
	}
	t.Logf("without fencing: %d orders for %d units", r.Orders, units-r.Left)
}
