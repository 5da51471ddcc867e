module github.com/skipjack-dev/skipjack/examples/shop

go 1.26

require github.com/skipjack-dev/skipjack/runtime v0.0.0

replace github.com/skipjack-dev/skipjack/runtime => ../../runtime
