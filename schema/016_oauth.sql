-- OAuth 2.1 for MCP clients that connect with only a URL: aasd is the
-- authorization server and /v1/mcp the protected resource. Codes and
-- tokens are shown once and stored as their hex SHA-256.
--
-- Lock order (docs/oauth.md): a code or token row first, then its grant.

-- A client: a Client ID Metadata Document (client_id is its https URL,
-- the row a copy of the document) or one registered here (RFC 7591).
CREATE TABLE oauth_clients (
    client_id      text PRIMARY KEY CHECK (length(client_id) <= 512),
    kind           text NOT NULL CHECK (kind IN ('document', 'registered')),
    client_name    text NOT NULL CHECK (length(client_name) BETWEEN 1 AND 100),
    client_uri     text CHECK (length(client_uri) <= 512),
    redirect_uris  jsonb NOT NULL CHECK (jsonb_typeof(redirect_uris) = 'array'),
    registered_by  text CHECK (length(registered_by) <= 64),
    created_at     timestamptz NOT NULL DEFAULT now(),
    fetched_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_clients_registered_idx ON oauth_clients (created_at) WHERE kind = 'registered';

-- An account's consent to a client, for one resource. Revoking it ends
-- every token made under it.
CREATE TABLE oauth_grants (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id     uuid NOT NULL REFERENCES accounts(id),
    client_id      text NOT NULL CHECK (length(client_id) <= 512),
    client_name    text NOT NULL CHECK (length(client_name) <= 100),
    resource       text NOT NULL CHECK (length(resource) <= 600),
    scope          text NOT NULL CHECK (length(scope) <= 100),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz,
    revoked_at     timestamptz,
    revoke_reason  text CHECK (revoke_reason IN ('user', 'code_reuse', 'refresh_reuse', 'account'))
);
CREATE INDEX oauth_grants_account_idx ON oauth_grants (account_id) WHERE revoked_at IS NULL;

-- An authorization code: single use, a minute long. Kept a while after
-- use so a second redemption is recognised and revokes its grant.
CREATE TABLE oauth_codes (
    code_hash       text PRIMARY KEY CHECK (code_hash ~ '^[0-9a-f]{64}$'),
    client_id       text NOT NULL CHECK (length(client_id) <= 512),
    account_id      uuid NOT NULL REFERENCES accounts(id),
    client_name     text NOT NULL CHECK (length(client_name) <= 100),
    redirect_uri    text NOT NULL CHECK (length(redirect_uri) <= 512),
    code_challenge  text NOT NULL CHECK (code_challenge ~ '^[A-Za-z0-9_-]{43}$'),
    resource        text NOT NULL CHECK (length(resource) <= 600),
    scope           text NOT NULL CHECK (length(scope) <= 100),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz,
    grant_id        uuid REFERENCES oauth_grants(id)
);
CREATE INDEX oauth_codes_expires_idx ON oauth_codes (expires_at);

-- Access tokens (short) and refresh tokens (rotated: each use makes a new
-- one and marks the old used; a used one shown again revokes the grant).
CREATE TABLE oauth_tokens (
    token_hash  text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    grant_id    uuid NOT NULL REFERENCES oauth_grants(id),
    kind        text NOT NULL CHECK (kind IN ('access', 'refresh')),
    resource    text NOT NULL CHECK (length(resource) <= 600),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX oauth_tokens_grant_idx ON oauth_tokens (grant_id);
CREATE INDEX oauth_tokens_expires_idx ON oauth_tokens (expires_at);
