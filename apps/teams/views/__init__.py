"""The teams app's pages, one module per area: teams, members, tokens, accounts."""
