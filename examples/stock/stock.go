// Command stock is a stock-deduction service guarded by a redlock lock
// with fencing tokens, against PostgreSQL: several instances sell units of
// one item, each under the lock, and the row's fence column refuses the
// write of an instance that was paused past its lock's deadline, so that
// no unit is oversold even then.
//
//	go run . -redis redis://h1:6379,redis://h2:6379,redis://h3:6379 -pg postgres://user@host/db
//
// `go test` runs it end to end on its own redis-server and PostgreSQL
// servers (Debian's postgresql package), with one instance paused.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redlock-go/redlock"
)

// Schema creates the tables: stock keeps the fence column beside the
// quantity it protects.
const Schema = `
CREATE TABLE IF NOT EXISTS stock  (id text PRIMARY KEY, qty int NOT NULL CHECK (qty >= 0), fence bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, item text NOT NULL, instance text NOT NULL, token bigint NOT NULL);`

var (
	// ErrSoldOut: the item has no units left.
	ErrSoldOut = errors.New("stock: sold out")
	// ErrStale: the write carried a fencing token lower than the row's;
	// another instance took the lock and wrote since this one read.
	ErrStale = errors.New("stock: stale fencing token: write refused")
)

// Service is one instance of the service.
type Service struct {
	Name  string
	Locks *redlock.Client // made WithFencing
	DB    *pgxpool.Pool
	TTL   time.Duration
	// Fenced: check the token in the UPDATE (false only to show what goes
	// wrong without it).
	Fenced bool
	// Pause, if set, runs between the read and the write of a sale: the
	// test stops one instance there past its lock's deadline.
	Pause func(l *redlock.Lock)
}

// Sell sells one unit of item: under the lock, read the quantity, then
// write it back one lower with the lock's token, and record the order in
// the same transaction.
func (s *Service) Sell(ctx context.Context, item string) error {
	l, err := s.Locks.Lock(ctx, "stock:"+item, s.TTL)
	if err != nil {
		return err
	}
	defer l.Release(context.WithoutCancel(ctx))
	var qty int
	if err := s.DB.QueryRow(ctx, `SELECT qty FROM stock WHERE id = $1`, item).Scan(&qty); err != nil {
		return fmt.Errorf("stock: read %s: %w", item, err)
	}
	if qty == 0 {
		return ErrSoldOut
	}
	if s.Pause != nil {
		s.Pause(l)
	}
	return s.write(ctx, item, qty-1, l.Token())
}

// write stores qty and one order in one transaction; with fencing only if
// no later token has written the row: fence < token. Each hold writes the
// row once, so an equal token is refused too, whoever carries it (see
// package fence for the variant that lets one holder write again).
func (s *Service) write(ctx context.Context, item string, qty int, token int64) error {
	tx, err := s.DB.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	q := `UPDATE stock SET qty = $1, fence = $2 WHERE id = $3 AND fence < $2`
	if !s.Fenced {
		q = `UPDATE stock SET qty = $1, fence = $2 WHERE id = $3`
	}
	tag, err := tx.Exec(ctx, q, qty, token, item)
	if err != nil {
		return fmt.Errorf("stock: write %s: %w", item, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrStale
	}
	if _, err := tx.Exec(ctx, `INSERT INTO orders (item, instance, token) VALUES ($1, $2, $3)`, item, s.Name, token); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// SellAll sells units of item until it is sold out or ctx ends, and
// returns how many sales were refused as stale.
func (s *Service) SellAll(ctx context.Context, item string) (stale int, err error) {
	for {
		switch err := s.Sell(ctx, item); {
		case errors.Is(err, ErrSoldOut):
			return stale, nil
		case errors.Is(err, ErrStale):
			stale++
		case err != nil:
			return stale, err
		}
	}
}
