module github.com/runhub/runhub

go 1.26.0
