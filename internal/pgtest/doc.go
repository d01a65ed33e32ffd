// Package pgtest gives a test its own empty PostgreSQL schema on the server
// named by SUANLI_TEST_POSTGRES_DSN, and drops it when the test ends. When
// the variable is unset or the server does not answer, the test ends through
// testreq.Missing("postgres", …): a skip on a developer's machine, a failure
// in CI (SUANLI_TEST_REQUIRE=all).
//
// It owns only schemas whose names start with "suanli_test_"; it must not
// touch anything else in the database it is pointed at.
package pgtest
