-- A password reset or change ends the account's OAuth grants: their
-- revoke_reason says so.
ALTER TABLE oauth_grants DROP CONSTRAINT IF EXISTS oauth_grants_revoke_reason_check;
ALTER TABLE oauth_grants ADD CONSTRAINT oauth_grants_revoke_reason_check
    CHECK (revoke_reason IN ('user', 'code_reuse', 'refresh_reuse', 'account', 'password'));
