package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// withSearchPath returns the connection string with search_path set to
// schema, as a URL parameter or a DSN keyword (pgx passes either to the
// server as a run-time parameter), so counterd migrates into the schema
// and every unqualified table name resolves there.
func withSearchPath(conn, schema string) (string, error) {
	return withParam(conn, "search_path", schema)
}

// withParam sets one run-time parameter in a connection string, a URL or
// a DSN. value must need no quoting in a DSN.
func withParam(conn, name, value string) (string, error) {
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, err := url.Parse(conn)
		if err != nil {
			return "", errors.New("DATABASE_URL is not a valid PostgreSQL URL")
		}
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return conn + " " + name + "=" + value, nil
}

// resetSchema drops the run's schema with everything in it and creates it
// empty.
func resetSchema(ctx context.Context, conn, schema string) error {
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer c.Close(ctx)
	id := pgx.Identifier{schema}.Sanitize()
	if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+id+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+id); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}
