select name, sum(amount) as total from {{ ref('stg_a') }} group by name
