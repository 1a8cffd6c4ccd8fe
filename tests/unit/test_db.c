/* test_db.c - checked reads of result fields (base/db.h), on results
 * built in memory with libpq's own constructors; then the one-row queries
 * against the unit PostgreSQL (AAS_TEST_DATABASE_URL, which tests/run.sh
 * sets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/db.h"
#include "base/num.h"

#define TEST_MAX_COLS 8

/* A result of one row whose text columns are `vals` (NULL: SQL NULL). */
static PGresult *
one_row(const char *const *vals, int n)
{
	PGresAttDesc cols[TEST_MAX_COLS];
	char names[TEST_MAX_COLS][16];
	PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);

	assert_non_null(r);
	assert_true(n > 0 && n <= TEST_MAX_COLS);
	memset(cols, 0, sizeof(cols));
	for (int i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "c%d", i);
		cols[i].name = names[i];
		cols[i].typid = 25; /* text */
		cols[i].typlen = -1;
		cols[i].atttypmod = -1;
	}
	assert_int_equal(PQsetResultAttrs(r, n, cols), 1);
	for (int i = 0; i < n; i++)
		assert_int_equal(PQsetvalue(r, 0, i, (char *)vals[i],
				     vals[i] ? (int)strlen(vals[i]) : -1),
		    1);
	return r;
}

/* A result of one column holding `text`. */
static PGresult *
one_field(const char *text)
{
	const char *vals[1] = { text };

	return one_row(vals, 1);
}

static void
test_ll_in_range(void **state)
{
	static const struct {
		const char *text;
		long long want;
	} cases[] = {
		{ "0", 0 },
		{ "42", 42 },
		{ "-7", -7 },
		{ "9223372036854775807", INT64_MAX },
		{ "-9223372036854775808", INT64_MIN },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		PGresult *r = one_field(cases[i].text);
		struct err e;
		long long v = 1;

		err_clear(&e);
		assert_int_equal(db_get_ll(r, 0, 0, &v, &e), 0);
		assert_true(v == cases[i].want);
		assert_int_equal(e.kind, ERR_NONE);
		v = 1;
		assert_int_equal(db_get_ll_or(r, 0, 0, 99, &v, &e), 0);
		assert_true(v == cases[i].want);
		PQclear(r);
	}
}

static void
test_int_in_and_out_of_range(void **state)
{
	static const struct {
		const char *text;
		int ok;
		int want;
	} cases[] = {
		{ "2147483647", 1, INT32_MAX },
		{ "-2147483648", 1, INT32_MIN },
		{ "1440", 1, 1440 },
		{ "2147483648", 0, 0 },
		{ "-2147483649", 0, 0 },
		{ "9223372036854775807", 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		PGresult *r = one_field(cases[i].text);
		struct err e;
		int v = -1;

		err_clear(&e);
		assert_int_equal(db_get_int(r, 0, 0, &v, &e), cases[i].ok ? 0 : -1);
		assert_int_equal(e.kind, cases[i].ok ? ERR_NONE : ERR_INTERNAL);
		if (cases[i].ok)
			assert_int_equal(v, cases[i].want);
		err_clear(&e);
		assert_int_equal(db_get_int_or(r, 0, 0, 5, &v, &e), cases[i].ok ? 0 : -1);
		assert_int_equal(e.kind, cases[i].ok ? ERR_NONE : ERR_INTERNAL);
		PQclear(r);
	}
}

static void
test_non_numeric_text_is_refused(void **state)
{
	static const char *const texts[] = {
		"",
		"abc",
		"12x",
		"1.5",
		"1e3",
		"0x10",
		"-",
		"9223372036854775808",
		"-9223372036854775809",
		"99999999999999999999",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		PGresult *r = one_field(texts[i]);
		struct err e;
		long long v;
		int iv;

		err_clear(&e);
		assert_int_equal(db_get_ll(r, 0, 0, &v, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		assert_non_null(strstr(e.msg, "not an integer"));
		err_clear(&e);
		/* A default stands for NULL only, never for bad text. */
		assert_int_equal(db_get_ll_or(r, 0, 0, 3, &v, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		err_clear(&e);
		assert_int_equal(db_get_int_or(r, 0, 0, 3, &iv, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		assert_int_equal(num_parse_ll(texts[i], &v), -1);
		PQclear(r);
	}
	assert_int_equal(num_parse_ll(NULL, &(long long){ 0 }), -1);
}

static void
test_null_with_and_without_default(void **state)
{
	PGresult *r = one_field(NULL);
	struct err e;
	long long v = 1;
	int iv = 1;

	(void)state;
	err_clear(&e);
	assert_int_equal(db_get_ll(r, 0, 0, &v, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	assert_non_null(strstr(e.msg, "NULL"));
	err_clear(&e);
	assert_int_equal(db_get_int(r, 0, 0, &iv, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);

	err_clear(&e);
	assert_int_equal(db_get_ll_or(r, 0, 0, -1, &v, &e), 0);
	assert_true(v == -1);
	assert_int_equal(db_get_ll_or(r, 0, 0, INT64_MAX, &v, &e), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(db_get_int_or(r, 0, 0, 30000, &iv, &e), 0);
	assert_int_equal(iv, 30000);
	assert_int_equal(e.kind, ERR_NONE);
	assert_null(db_get_text(r, 0, 0));
	PQclear(r);
}

static void
test_booleans(void **state)
{
	static const struct {
		const char *text;
		int ok;
		int want;
	} cases[] = {
		{ "t", 1, 1 },
		{ "f", 1, 0 },
		{ NULL, 0, 0 },
		{ "", 0, 0 },
		{ "true", 0, 0 },
		{ "false", 0, 0 },
		{ "1", 0, 0 },
		{ "T", 0, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		PGresult *r = one_field(cases[i].text);
		struct err e;
		int v = -1;

		err_clear(&e);
		assert_int_equal(db_get_bool(r, 0, 0, &v, &e), cases[i].ok ? 0 : -1);
		assert_int_equal(e.kind, cases[i].ok ? ERR_NONE : ERR_INTERNAL);
		if (cases[i].ok)
			assert_int_equal(v, cases[i].want);
		PQclear(r);
	}
}

static void
test_strings_fit_or_fail(void **state)
{
	const char *vals[2] = { "0123456789", NULL };
	PGresult *r = one_row(vals, 2);
	char buf[16];
	struct err e;

	(void)state;
	err_clear(&e);
	/* Exactly the length plus its terminator fits. */
	assert_int_equal(db_get_str(r, 0, 0, buf, 11, &e), 0);
	assert_string_equal(buf, "0123456789");
	assert_int_equal(db_get_str(r, 0, 0, buf, sizeof(buf), &e), 0);
	assert_string_equal(buf, "0123456789");
	assert_int_equal(e.kind, ERR_NONE);
	/* One byte short is an error, not a clipped copy. */
	memcpy(buf, "untouched", 10);
	assert_int_equal(db_get_str(r, 0, 0, buf, 10, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	assert_string_equal(buf, "untouched");
	err_clear(&e);
	assert_int_equal(db_get_str(r, 0, 0, buf, 1, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	/* NULL reads as the empty string. */
	err_clear(&e);
	assert_int_equal(db_get_str(r, 0, 1, buf, sizeof(buf), &e), 0);
	assert_string_equal(buf, "");
	assert_int_equal(db_get_str(r, 0, 1, buf, 1, &e), 0);
	assert_string_equal(buf, "");
	assert_string_equal(db_get_text(r, 0, 0), "0123456789");
	assert_null(db_get_text(r, 0, 1));
	PQclear(r);
}

static void
test_missing_row_or_column(void **state)
{
	static const struct {
		int row, col;
	} where[] = {
		{ 1, 0 },
		{ 0, 2 },
		{ -1, 0 },
		{ 0, -1 },
		{ 5, 5 },
	};
	const char *vals[2] = { "1", "t" };
	PGresult *r = one_row(vals, 2);
	PGresult *empty = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	char buf[8];

	(void)state;
	assert_non_null(empty);
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		int row = where[i].row, col = where[i].col;
		struct err e;
		long long v;
		int iv;

		err_clear(&e);
		assert_int_equal(db_get_ll(r, row, col, &v, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		assert_non_null(strstr(e.msg, "lacks row"));
		err_clear(&e);
		/* A default is no excuse for a column that is not there. */
		assert_int_equal(db_get_ll_or(r, row, col, 0, &v, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		err_clear(&e);
		assert_int_equal(db_get_int_or(r, row, col, 0, &iv, &e), -1);
		err_clear(&e);
		assert_int_equal(db_get_bool(r, row, col, &iv, &e), -1);
		err_clear(&e);
		assert_int_equal(db_get_str(r, row, col, buf, sizeof(buf), &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		assert_null(db_get_text(r, row, col));
	}
	/* No rows at all, and no result at all. */
	for (int k = 0; k < 2; k++) {
		PGresult *x = k == 0 ? empty : NULL;
		struct err e;
		long long v;

		err_clear(&e);
		assert_int_equal(db_get_ll(x, 0, 0, &v, &e), -1);
		assert_int_equal(e.kind, ERR_INTERNAL);
		err_clear(&e);
		assert_int_equal(db_get_str(x, 0, 0, buf, sizeof(buf), &e), -1);
		assert_null(db_get_text(x, 0, 0));
	}
	PQclear(empty);
	PQclear(r);
}

static void
test_first_error_wins(void **state)
{
	const char *vals[2] = { "x", "7" };
	PGresult *r = one_row(vals, 2);
	struct err e;
	long long v;

	(void)state;
	err_clear(&e);
	assert_int_equal(db_get_ll(r, 0, 0, &v, &e), -1);
	assert_int_equal(db_get_ll(r, 0, 9, &v, &e), -1);
	assert_non_null(strstr(e.msg, "column 0 is not an integer"));
	PQclear(r);
}

/* A row's fields are read in column order by their kinds, NULL as 0 in
 * the _OR0 kinds; the first that does not read stops the rest. */
static void
test_take_row(void **state)
{
	const char *vals[7] = { "abc", "-5", NULL, "12", NULL, "t", "x" };
	char s[8] = "";
	long long ll = 1, ll0 = 1;
	int i = 1, i0 = 1, b = 0, after = 42;
	const struct db_col cols[] = { DB_STR(s, sizeof(s)), DB_LL(&ll), DB_LL_OR0(&ll0),
		DB_INT(&i), DB_INT_OR0(&i0), DB_BOOL(&b) };
	const struct db_col bad[] = { DB_STR(s, sizeof(s)), DB_LL(&ll), DB_LL_OR0(&ll0), DB_INT(&i),
		DB_INT_OR0(&i0), DB_BOOL(&b), DB_INT(&after), DB_INT(&after) };
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(db_take_row(one_row(vals, 7), cols, DB_NCOLS(cols), &e), 0);
	assert_string_equal(s, "abc");
	assert_int_equal(ll, -5);
	assert_int_equal(ll0, 0);
	assert_int_equal(i, 12);
	assert_int_equal(i0, 0);
	assert_int_equal(b, 1);
	/* Column 6 is no number: -1, and column 7 (not there) is not read. */
	assert_int_equal(db_take_row(one_row(vals, 7), bad, DB_NCOLS(bad), &e), -1);
	assert_non_null(strstr(e.msg, "column 6 is not an integer"));
	assert_int_equal(after, 42);
	/* A string that does not fit, and a query that failed. */
	err_clear(&e);
	assert_int_equal(db_take_row(one_field("too long for s"), cols, 1, &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	err_clear(&e);
	assert_int_equal(db_take_row(NULL, cols, DB_NCOLS(cols), &e), -1);
	assert_int_equal(e.kind, ERR_NONE);
}

/* No row (or more than one) is 0, one row is read (1), a bad field or a
 * failed query is -1. */
static void
test_take_row_or_none(void **state)
{
	PGresult *empty = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresult *two = one_field("1");
	long long v = 7;
	const struct db_col cols[] = { DB_LL(&v) };
	struct err e;

	(void)state;
	assert_non_null(empty);
	assert_int_equal(PQsetvalue(two, 1, 0, "2", 1), 1);
	err_clear(&e);
	assert_int_equal(db_take_row_or_none(empty, cols, DB_NCOLS(cols), &e), 0);
	assert_int_equal(db_take_row_or_none(two, cols, DB_NCOLS(cols), &e), 0);
	assert_int_equal(v, 7);
	assert_int_equal(db_take_row_or_none(one_field("9"), cols, DB_NCOLS(cols), &e), 1);
	assert_int_equal(v, 9);
	assert_int_equal(e.kind, ERR_NONE);
	assert_int_equal(db_take_row_or_none(one_field("nine"), cols, DB_NCOLS(cols), &e), -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	err_clear(&e);
	assert_int_equal(db_take_row_or_none(NULL, cols, DB_NCOLS(cols), &e), -1);
}

/* ---- one-row queries, on the unit PostgreSQL ---- */

static int
db_open(void **state)
{
	const char *url = getenv("AAS_TEST_DATABASE_URL");
	struct err e;

	if (url == NULL || *url == '\0') {
		print_error("AAS_TEST_DATABASE_URL is not set: the one-row query tests need"
			    " PostgreSQL (tests/run.sh starts one and sets it)\n");
		return -1;
	}
	err_clear(&e);
	*state = db_new(url, 2, &e);
	return *state ? 0 : -1;
}

static int
db_close(void **state)
{
	db_free(*state);
	return 0;
}

#define ROW_SQL "SELECT $1::text FROM generate_series(1, $2::int)"

static void
test_row_found(void **state)
{
	const char *p[2] = { "abc", "1" };
	PGresult *r;
	struct err e;

	err_clear(&e);
	r = db_query_row(*state, ROW_SQL, 2, p, &e, ERR_NOT_FOUND, "thing_id", "no thing %s", p[0]);
	assert_non_null(r);
	assert_int_equal(e.kind, ERR_NONE);
	assert_int_equal(PQntuples(r), 1);
	assert_string_equal(db_get_text(r, 0, 0), "abc");
	PQclear(r);
}

static void
test_no_row_is_the_callers_error(void **state)
{
	const char *p[2] = { "abc", "0" };
	struct err e;

	err_clear(&e);
	assert_null(db_query_row(*state, ROW_SQL, 2, p, &e, ERR_NOT_FOUND, "thing_id",
	    "thing_id: no thing %.2s in %s", p[0], "your account"));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_string_equal(e.field, "thing_id");
	assert_string_equal(e.msg, "thing_id: no thing ab in your account");
	/* Another kind, and no field. */
	err_clear(&e);
	assert_null(db_query_row(*state, ROW_SQL, 2, p, &e, ERR_UNAUTHORIZED, NULL,
	    "invalid token"));
	assert_int_equal(e.kind, ERR_UNAUTHORIZED);
	assert_string_equal(e.field, "");
	assert_string_equal(e.msg, "invalid token");
}

static void
test_two_rows_are_none(void **state)
{
	const char *p[2] = { "abc", "2" };
	struct err e;

	err_clear(&e);
	assert_null(db_query_row(*state, ROW_SQL, 2, p, &e, ERR_NOT_FOUND, NULL, "no thing"));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_string_equal(e.msg, "no thing");
}

static void
test_query_error_stays(void **state)
{
	const char *p[2] = { "abc", "not a number" };
	struct err e;

	/* The statement's own failure is reported, not the missing row. */
	err_clear(&e);
	assert_null(db_query_row(*state, ROW_SQL, 2, p, &e, ERR_NOT_FOUND, NULL, "no thing"));
	assert_int_not_equal(e.kind, ERR_NOT_FOUND);
	assert_int_not_equal(e.kind, ERR_NONE);
	/* A caller's earlier error is kept, as err_set keeps it. */
	p[1] = "0";
	err_clear(&e);
	err_set(&e, ERR_CONFLICT, "first");
	assert_null(db_query_row(*state, ROW_SQL, 2, p, &e, ERR_NOT_FOUND, NULL, "no thing"));
	assert_int_equal(e.kind, ERR_CONFLICT);
	assert_string_equal(e.msg, "first");
}

/* Inside a transaction: the row's text into arg, or the caller's error. */
static int
row_tx(PGconn *c, void *arg, struct err *e)
{
	char *out = arg;
	const char *p[2] = { out, out[0] == 'x' ? "1" : "0" };
	PGresult *r = db_conn_query_row(c, ROW_SQL, 2, p, e, ERR_INVALID, "invalid_grant",
	    "unknown code %s", out);
	int rc;

	if (r == NULL)
		return -1;
	rc = db_get_str(r, 0, 0, out + 8, 8, e);
	PQclear(r);
	return rc;
}

static void
test_conn_row(void **state)
{
	char buf[16] = "xyz";
	struct err e;

	err_clear(&e);
	assert_int_equal(db_tx(*state, row_tx, buf, &e), 0);
	assert_string_equal(buf + 8, "xyz");
	memcpy(buf, "abc", 4);
	assert_int_equal(db_tx(*state, row_tx, buf, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_string_equal(e.field, "invalid_grant");
	assert_string_equal(e.msg, "unknown code abc");
}

/* A count's number is taken and its result cleared; a failed query, a
 * query without rows and a non-number are each -1. */
static void
test_take_ll(void **state)
{
	const char *p[1] = { "3" };
	long long n = -1;
	struct err e;

	err_clear(&e);
	assert_int_equal(db_take_ll(db_query(*state,
					"SELECT count(*) FROM generate_series(1, $1::int)", 1, p,
					&e),
			     &n, &e),
	    0);
	assert_int_equal(n, 3);
	assert_int_equal(db_take_ll(db_query(*state, "SELECT 1 WHERE false", 0, NULL, &e), &n, &e),
	    -1);
	assert_int_equal(e.kind, ERR_INTERNAL);
	err_clear(&e);
	assert_int_equal(db_take_ll(db_query(*state, "SELECT 'x'", 0, NULL, &e), &n, &e), -1);
	err_clear(&e);
	assert_int_equal(db_take_ll(db_query(*state, "SELECT $1::int", 1, (const char *[]){ "x" },
					&e),
			     &n, &e),
	    -1);
	assert_int_not_equal(e.kind, ERR_NONE);
	assert_int_equal(n, 3);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ll_in_range),
		cmocka_unit_test(test_int_in_and_out_of_range),
		cmocka_unit_test(test_non_numeric_text_is_refused),
		cmocka_unit_test(test_null_with_and_without_default),
		cmocka_unit_test(test_booleans),
		cmocka_unit_test(test_strings_fit_or_fail),
		cmocka_unit_test(test_missing_row_or_column),
		cmocka_unit_test(test_first_error_wins),
		cmocka_unit_test(test_take_row),
		cmocka_unit_test(test_take_row_or_none),
		cmocka_unit_test_setup_teardown(test_row_found, db_open, db_close),
		cmocka_unit_test_setup_teardown(test_no_row_is_the_callers_error, db_open,
		    db_close),
		cmocka_unit_test_setup_teardown(test_two_rows_are_none, db_open, db_close),
		cmocka_unit_test_setup_teardown(test_query_error_stays, db_open, db_close),
		cmocka_unit_test_setup_teardown(test_conn_row, db_open, db_close),
		cmocka_unit_test_setup_teardown(test_take_ll, db_open, db_close),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
