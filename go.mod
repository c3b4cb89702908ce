module github.com/berth-sh/berth

go 1.26.8
