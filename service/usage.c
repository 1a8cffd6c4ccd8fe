/* usage.c - get_usage and extend_sandbox over billing/. */
#include "service/usage.h"

#include "billing/billing.h"

json_t *
usage_get(struct app *app, const char *account, const struct usage_req *req, struct err *e)
{
	json_t *args = json_pack("{s:i}", "limit", req->limit);
	json_t *out;

	if (args && req->cursor)
		json_object_set_new(args, "cursor", json_string(req->cursor));
	out = bill_usage(app->db, &app->cfg, account, args, e);
	json_decref(args);
	return out;
}

json_t *
usage_extend(struct app *app, const char *account, const struct usage_extend_req *req,
    struct err *e)
{
	return bill_extend(app->db, &app->cfg, account, req->sandbox_id, req->minutes, e);
}
