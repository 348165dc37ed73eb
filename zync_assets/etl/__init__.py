"""ETL: raw pools → staging pools with done records, cursors and expiry."""
