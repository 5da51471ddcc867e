module github.com/skipjack-dev/skipjack

go 1.26
