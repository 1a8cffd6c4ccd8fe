-- The network an account signed up from (IPv4 /24, IPv6 /48, as text),
-- so the free credit its verification grants is counted per network
-- (docs/billing.md#free-credit). NULL for accounts made by the operator.
ALTER TABLE accounts ADD COLUMN signup_net text CHECK (length(signup_net) <= 64);
