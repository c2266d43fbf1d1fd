package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redlock-go/redlock"
)

func main() {
	nodes := flag.String("redis", "redis://127.0.0.1:6379", "comma-separated Redis node URLs")
	dsn := flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres", "PostgreSQL connection string")
	n := flag.Int("instances", 4, "instances selling at once")
	units := flag.Int("units", 100, "units of stock to sell")
	flag.Parse()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	r, err := Run(ctx, db, strings.Split(*nodes, ","), *n, *units, true, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("sold %d of %d units, %d left, %d stale writes refused\n", r.Orders, *units, r.Left, r.Stale)
}

// Result is what a run sold.
type Result struct {
	Orders int // orders recorded
	Left   int // units left in stock
	Stale  int // writes refused for a stale token
}

// Run stocks item "widget" with units, runs n instances selling it, each
// with its own Client (fencing on) as separate processes would, and
// returns the orders and stock left. fenced false leaves the token out of
// the UPDATE (to show the oversell it prevents); pause, if set, is
// instance 0's Pause.
func Run(ctx context.Context, db *pgxpool.Pool, urls []string, n, units int, fenced bool, pause func(*redlock.Lock)) (Result, error) {
	if _, err := db.Exec(ctx, Schema+`TRUNCATE orders; DELETE FROM stock;`); err != nil {
		return Result{}, err
	}
	if _, err := db.Exec(ctx, `INSERT INTO stock (id, qty) VALUES ('widget', $1)`, units); err != nil {
		return Result{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	stale := make([]int, n)
	for i := 0; i < n; i++ {
		c, err := redlock.NewFromURLs(urls, redlock.WithFencing(), redlock.WithName(fmt.Sprintf("stock-%d", i)))
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		s := &Service{Name: fmt.Sprintf("stock-%d", i), Locks: c, DB: db, TTL: 500 * time.Millisecond, Fenced: fenced}
		if i == 0 {
			s.Pause = pause
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			stale[i], errs[i] = s.SellAll(ctx, "widget")
		}()
	}
	wg.Wait()
	var r Result
	for i := range errs {
		if errs[i] != nil {
			return r, errs[i]
		}
		r.Stale += stale[i]
	}
	err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders), (SELECT qty FROM stock WHERE id = 'widget')`).Scan(&r.Orders, &r.Left)
	return r, err
}
